"""A submission and its gradings' record: intake (checks, quota, a team's credit, the late days
it holds), its status history, grading jobs and their cases, who may see what, and its pages."""
