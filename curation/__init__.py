"""Reference-pool curation: build candidates, rate them in a local app, inspect and export pools."""
