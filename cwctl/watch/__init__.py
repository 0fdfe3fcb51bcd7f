"""The long-running watch: rounds, /metrics, policy, decisions."""
