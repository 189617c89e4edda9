"""Episode loop and GRPO training: the library, with its commands in commands.py."""
