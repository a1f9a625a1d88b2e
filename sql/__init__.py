"""SQL shipped as package data: migrations/NNN_name.sql (tables) and views/<name>.sql (views, macros)."""
