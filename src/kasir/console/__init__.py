"""The operators' and merchants' web console (issue 23): reads and acts through the rooms' services."""
