"""video.transforms"""
