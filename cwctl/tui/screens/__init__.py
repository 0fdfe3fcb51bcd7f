"""The app's screens: the dashboard, host detail, help, filter and the action dialogs."""
