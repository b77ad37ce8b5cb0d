"""The rules and records of crowd work on the platforms, as the work flows: publishing it, syncing
what comes back, reviewing and paying, with every payment action audited. The platforms' own
calls are in mturk/platforms/."""
