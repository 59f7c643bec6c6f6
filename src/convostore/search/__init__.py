"""Full-text search: the index, its text and its resumable build."""
