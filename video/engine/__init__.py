"""video.engine"""
