"""Who may read `/metrics`, as Kubernetes decides it (controller-runtime's
`WithAuthenticationAndAuthorization`, which Kueue uses): the scraper's bearer token is
checked with a TokenReview, then its user with a SubjectAccessReview for `get` on the
non-resource URL `/metrics`. Shared by the webhook and the controller; imports neither."""
