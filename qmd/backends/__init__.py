"""The storage seam (base.py: IndexBackend) and its two implementations (sqlite/, postgres/)."""
