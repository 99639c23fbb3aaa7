"""The storage seam (backend.py) and its implementations (sqlite/)."""
