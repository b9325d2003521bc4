-- channels_page (repository, updated_at DESC, id) serves every query channels_by_repository
-- (repository, updated_at) served, in either order. Every commit moves its document's
-- updated_at, so each index on that column is one more entry written per commit.
DROP INDEX channels_by_repository;
