"""Background jobs of the collection pipeline: thin wrappers that load by id and call a service."""
