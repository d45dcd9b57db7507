"""CLI subcommands: each module parses its flags and calls into the library; no logic lives here."""
