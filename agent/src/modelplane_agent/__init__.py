"""The modelplane agent."""
