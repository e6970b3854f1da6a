"""The engine store: content-addressed, immutable, verified engines (docs/store.md)."""
