"""The directory of conversations: listing, retention and prune, the chosen leaf."""
