"""What counts: which submission counts for whom, how late it is, what late days it spends, and
the rules that move it; one `recount` settles a lab's students after any of them changes."""
