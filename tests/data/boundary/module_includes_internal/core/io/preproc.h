// Fixture: a public header.
