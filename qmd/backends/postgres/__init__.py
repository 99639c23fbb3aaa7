"""The PostgreSQL implementation of the storage seam (psycopg 3 + pgvector), one schema per index."""
