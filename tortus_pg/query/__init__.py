"""The query side: the stages that turn a question into an answer."""
