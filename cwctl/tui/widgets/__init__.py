"""The dashboard's widgets: heatmap, suspects, hosts, status bar, history."""
