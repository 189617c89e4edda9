"""Scoring of final paintings: gate, length, judge, HPSv3, style."""
