"""video package: action recognition from video files, raw frames and pre-extracted frame features."""
