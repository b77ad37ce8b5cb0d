"""The benchmark as files: the published VisIT-Bench sheets read strictly (sheets) in the layouts
the authors published (layouts), imported (imports) and written back (exports), and versioned
snapshots of the verified benchmark and the human preferences (snapshots), downloaded only by
those allowed to (downloads)."""
