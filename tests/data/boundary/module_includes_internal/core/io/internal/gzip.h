// Fixture: an internal header.
