"""Episode loop and GRPO training (issue 4)."""
