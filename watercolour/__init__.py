"""The `watercolour` command: one CLI that dispatches to the project's folders."""
