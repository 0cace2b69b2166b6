"""video.evaluation"""
