"""Messages: the one append (single, batch, import), reads, overlays, token estimates."""
