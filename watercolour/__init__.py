"""The `watercolour` command: one CLI that dispatches to the card's folders."""
