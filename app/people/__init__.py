"""A course's people as its staff manage them: enrolling and removing students and TAs,
roles, roster files, and the invite links that bring a new person in."""
