"""video.datasets"""
