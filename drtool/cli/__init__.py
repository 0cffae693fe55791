"""The `drtool` command line: parses and prints; the library does the work."""
