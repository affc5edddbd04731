// Placeholder until this module is written; see README.md for the layout.
