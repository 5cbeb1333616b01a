"""SQL function and view definitions, applied in file-name order after each migration."""
