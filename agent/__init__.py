"""Prompts, chat messages with images, code extraction and policy backends (issue 4)."""
