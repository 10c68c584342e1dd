"""Settings, database and security shared by every feature."""
