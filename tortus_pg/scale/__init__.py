"""The scale suite (`tortus-pg bench --scale`): synthetic graphs of growing size, several tenants
in one database, every query kind timed as the application role next to in-process peers."""
