"""DRA CEL device matching, shared by the scheduler function and the agent."""
