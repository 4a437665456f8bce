"""numoracle's pytest plugin (entry point ``pytest11``), being written."""
