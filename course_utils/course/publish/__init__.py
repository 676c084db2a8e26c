"""Publishing the course: pages and decks (`render`), the student and teacher builds (`builds`, `student_branch`,
`answer_key`, `handout`, `pdf`), the Binder links (`binder_links`), and their templates."""
