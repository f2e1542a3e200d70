package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config is where an S3-compatible store keeps the archives.
type S3Config struct {
	// Endpoint is host[:port] of the S3 API (s3.amazonaws.com, a MinIO server).
	Endpoint string
	// Bucket holds the archives, under Prefix.
	Bucket string
	Prefix string
	// AccessKey and SecretKey sign the requests; Region is the bucket's.
	// Without them, credentials come from AWS's default chain
	// (defaultChain): the environment, the shared credentials file, then
	// the instance's (or container's) role.
	AccessKey, SecretKey, Region string
	// IMDSEndpoint is the instance metadata service the role's
	// credentials come from; default http://169.254.169.254. Tests point
	// it at a fake.
	IMDSEndpoint string
	// Insecure talks plain HTTP instead of HTTPS.
	Insecure bool
	// MaxBytes bounds the archives together (DefaultMaxBytes when 0).
	MaxBytes int64
}

// S3 is a Store in an S3-compatible bucket, so that several berth hosts
// share their caches. Size is bounded as in Local: least recently written
// archives under the prefix are deleted beyond MaxBytes.
type S3 struct {
	c   *minio.Client
	cfg S3Config
	log *slog.Logger
}

// NewS3 connects to the bucket. It does no I/O.
func NewS3(cfg S3Config, log *slog.Logger) (*S3, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("cache: s3_endpoint and bucket are both needed for an S3 cache")
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if log == nil {
		log = slog.Default()
	}
	creds := credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	switch {
	case cfg.AccessKey == "" && cfg.SecretKey == "":
		creds = defaultChain(cfg.IMDSEndpoint)
	case cfg.AccessKey == "" || cfg.SecretKey == "":
		return nil, errors.New("cache: give both access_key and secret_key for the S3 cache, or neither to use AWS's default credentials (environment, ~/.aws/credentials, the instance's role)")
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  creds,
		Secure: !cfg.Insecure,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("cache: S3 endpoint %s: %w", cfg.Endpoint, err)
	}
	return &S3{c: c, cfg: cfg, log: log}, nil
}

// defaultChain is AWS's default credential chain as minio-go's providers
// cover it, first that answers wins: AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) from the environment; the
// shared credentials file (AWS_SHARED_CREDENTIALS_FILE or
// ~/.aws/credentials, profile AWS_PROFILE); then the role of the instance
// (IMDSv2, falling back to v1), an ECS task or an EKS pod (web identity),
// renewed before it expires. It is gitlab-runner's AuthenticationType
// "iam". Profiles that need SSO or a role to assume from ~/.aws/config are
// not among them.
func defaultChain(imds string) *credentials.Credentials {
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{Endpoint: imds},
	})
}

func (s *S3) object(key string) string {
	return strings.TrimSuffix(s.cfg.Prefix, "/") + "/" + fileName(key)
}

// Get opens key's archive; ErrNotFound when the bucket has none.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj := s.object(key)
	if _, err := s.c.StatObject(ctx, s.cfg.Bucket, obj, minio.StatObjectOptions{}); err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("cache %q in s3://%s/%s: %w", key, s.cfg.Bucket, obj, err)
	}
	o, err := s.c.GetObject(ctx, s.cfg.Bucket, obj, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("cache %q in s3://%s/%s: %w", key, s.cfg.Bucket, obj, err)
	}
	return o, nil
}

// Put uploads key's archive, then trims the bucket to its bound.
func (s *S3) Put(ctx context.Context, key string, r io.Reader) error {
	// Spool to a temp file first: the size is then known, so the upload is
	// one signed PUT (or a multipart upload of known parts) that every
	// S3-compatible server takes, and an archive over the bound is refused
	// before it is sent.
	tmp, err := os.CreateTemp("", "berth-cache-*.zip")
	if err != nil {
		return fmt.Errorf("store cache %q: %w", key, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, io.LimitReader(r, s.cfg.MaxBytes+1))
	if err != nil {
		return fmt.Errorf("store cache %q: %w", key, err)
	}
	if n > s.cfg.MaxBytes {
		return fmt.Errorf("cache %q is larger than the cache size limit of %d bytes; raise [cache] max_size_mb or cache fewer paths", key, s.cfg.MaxBytes)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := s.c.PutObject(ctx, s.cfg.Bucket, s.object(key), tmp, n, minio.PutObjectOptions{ContentType: "application/zip"}); err != nil {
		return fmt.Errorf("store cache %q in s3://%s: %w", key, s.cfg.Bucket, err)
	}
	return s.evict(ctx)
}

func (s *S3) evict(ctx context.Context) error {
	var objs []minio.ObjectInfo
	var total int64
	for o := range s.c.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: strings.TrimSuffix(s.cfg.Prefix, "/") + "/", Recursive: true}) {
		if o.Err != nil {
			return fmt.Errorf("list s3://%s: %w", s.cfg.Bucket, o.Err)
		}
		objs = append(objs, o)
		total += o.Size
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].LastModified.Before(objs[j].LastModified) })
	for _, o := range objs {
		if total <= s.cfg.MaxBytes {
			break
		}
		if err := s.c.RemoveObject(ctx, s.cfg.Bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			return err
		}
		total -= o.Size
		s.log.Info("cache evicted", "object", o.Key, "bytes", o.Size, "total", total, "max_bytes", s.cfg.MaxBytes)
	}
	return nil
}
