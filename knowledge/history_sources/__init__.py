"""Where optimization history comes from: a local git repository, merged GitHub pull requests, and the
proposals ASAP applied itself (with their measured outcome)."""
