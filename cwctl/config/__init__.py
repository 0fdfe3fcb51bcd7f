"""Reading TOML files (``tomlfile``: Python 3.11's tomllib or tomli) and checking
their tables and keys with errors that name the file, the table and the key
(``tomlcheck``)."""
