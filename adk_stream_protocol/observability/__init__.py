"""What a response leaves for operators: its span and metrics, and its recording."""
