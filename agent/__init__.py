"""Prompts, chat messages with images and policy backends (issue 4); the code in a reply is found by env.gate.extract_sketch."""
