"""video.models"""
