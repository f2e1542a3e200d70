package console

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-ci/berth/api"
)

// writeCached answers v as JSON with an ETag of its bytes, and 304 when
// the browser has those bytes already: the page polls every few seconds,
// and most polls change nothing.
func writeCached(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		api.WriteError(w, http.StatusInternalServerError, "encode: "+err.Error())
		return
	}
	h := fnv.New64a()
	h.Write(b)
	tag := fmt.Sprintf(`"%x"`, h.Sum64())
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "private, no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// timeRange reads ?from=&to= (unix seconds); the default is the last
// `def` up to now, and no range reaches beyond what History keeps.
func (c *Console) timeRange(r *http.Request, def time.Duration) (time.Time, time.Time) {
	now := c.opts.Clock()
	to, from := now, now.Add(-def)
	if v, err := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64); err == nil && v > 0 {
		to = time.Unix(v, 0)
	}
	if v, err := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64); err == nil && v > 0 {
		from = time.Unix(v, 0)
	}
	if to.After(now) {
		to = now
	}
	if week := now.Add(-7 * 24 * time.Hour); from.Before(week) {
		from = week
	}
	if !from.Before(to) {
		from = to.Add(-time.Minute)
	}
	return from, to
}

// instanceRow is one live instance on the fleet page.
type instanceRow struct {
	ID     string `json:"id"`
	Phase  string `json:"phase"`
	Group  string `json:"group"`
	Uses   int    `json:"uses"`
	EnvKey string `json:"env_key,omitempty"`
	// Created rather than an age: an age changes every second, and with it
	// the ETag, so no poll would ever be answered 304.
	Created      time.Time      `json:"created_at"`
	Slots        map[string]int `json:"slots"`
	DeleteReason string         `json:"delete_reason,omitempty"`
	LastError    string         `json:"last_error,omitempty"`
	Jobs         []JobRef       `json:"jobs"`
}

// fleetPage is the body of /ui/api/fleet.
type fleetPage struct {
	// Now counts instances by group, Phases by the core's phase names.
	Now       map[string]int `json:"now"`
	Phases    map[string]int `json:"phases"`
	Series    FleetSeries    `json:"series"`
	Instances []instanceRow  `json:"instances"`
	Deleted   []Deleted      `json:"deleted"`
}

func (c *Console) serveFleet(w http.ResponseWriter, r *http.Request, _ *session, p api.Principal) {
	from, to := c.timeRange(r, 24*time.Hour)
	page := fleetPage{Now: map[string]int{}, Phases: map[string]int{}, Series: c.hist.Fleet(from, to)}
	for _, g := range groupNames {
		page.Now[g] = 0
	}
	views := c.opts.Fleet.Instances()
	page.Instances = make([]instanceRow, 0, len(views))
	c.hist.mu.Lock()
	for _, v := range views {
		g := groupNames[groupOf(v.Phase)]
		page.Now[g]++
		page.Phases[v.Phase]++
		row := instanceRow{ID: v.ID, Phase: v.Phase, Group: g, Uses: v.UseCount, Created: v.Created.UTC().Truncate(time.Second),
			Slots: v.Slots, DeleteReason: string(v.DeleteReason), LastError: v.LastError, Jobs: visibleJobs(p, c.hist.instJobs[v.ID])}
		if v.Env != "" && c.ownsEnv(p, v.Env) {
			row.EnvKey = v.Env
		}
		page.Instances = append(page.Instances, row)
	}
	page.Deleted = c.hist.deleted.newest(100, nil)
	for i := range page.Deleted {
		page.Deleted[i].Jobs = visibleJobs(p, page.Deleted[i].Jobs)
	}
	c.hist.mu.Unlock()
	writeCached(w, r, page)
}

// visibleJobs keeps the jobs p may see, as a new slice.
func visibleJobs(p api.Principal, jobs []JobRef) []JobRef {
	out := []JobRef{}
	for _, j := range jobs {
		if p.Admin || (j.Owner != "" && j.Owner == p.Name) {
			out = append(out, j)
		}
	}
	return out
}

func (c *Console) ownsEnv(p api.Principal, key string) bool {
	if p.Admin {
		return true
	}
	if c.opts.EnvOwner == nil {
		return false
	}
	owner, known := c.opts.EnvOwner(key)
	return known && p.Owns(owner)
}

// jobRow is one job on the jobs page, of any source.
type jobRow struct {
	Source   string     `json:"source"`
	ID       string     `json:"id"`
	Owner    string     `json:"owner,omitempty"`
	State    string     `json:"state"`
	Created  *time.Time `json:"created_at,omitempty"`
	Started  *time.Time `json:"started_at,omitempty"`
	Finished *time.Time `json:"finished_at,omitempty"`
	WaitS    *float64   `json:"wait_s,omitempty"`
	Instance string     `json:"instance,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Script   string     `json:"script,omitempty"`
	// WaitingFor and WaitingDetail say why a queued job waits
	// (api.Job.WaitingFor).
	WaitingFor    string `json:"waiting_for,omitempty"`
	WaitingDetail string `json:"waiting_detail,omitempty"`
}

// jobsLimit bounds the jobs page: the newest ones; older jobs are in
// `berth jobs` and the API.
const jobsLimit = 200

func (c *Console) serveJobs(w http.ResponseWriter, r *http.Request, _ *session, p api.Principal) {
	state, source := r.URL.Query().Get("state"), r.URL.Query().Get("source")
	if state != "" && !api.JobState(state).Valid() {
		api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("unknown state %q: use queued, running, success, failed or canceled", state))
		return
	}
	rows := []jobRow{}
	if source == "" || source == "queue" {
		jobs, err := c.opts.Jobs.ListFor(p, api.JobState(state), jobsLimit)
		if err != nil {
			api.WriteError(w, http.StatusServiceUnavailable, "cannot list the queue's jobs: "+err.Error())
			return
		}
		for _, j := range slices.Backward(jobs) {
			rows = append(rows, queueRow(j))
		}
	}
	if source != "queue" && p.Admin { // other sources' jobs have no owner in berth: the admin's
		c.hist.mu.Lock()
		others := c.hist.others.newest(jobsLimit, func(j *OtherJob) bool {
			return (source == "" || j.Source == source) && (state == "" || j.State == state)
		})
		c.hist.mu.Unlock()
		for _, j := range others {
			row := jobRow{Source: j.Source, ID: j.ID, State: j.State, Started: &j.Started, Instance: j.Instance, Reason: j.Reason}
			if !j.Finished.IsZero() {
				row.Finished = &j.Finished
			}
			rows = append(rows, row)
		}
		slices.SortStableFunc(rows, func(a, b jobRow) int { return -startOf(a).Compare(startOf(b)) })
	}
	writeCached(w, r, map[string]any{"jobs": rows[:min(len(rows), jobsLimit)]})
}

func queueRow(j api.Job) jobRow {
	created := j.CreatedAt
	row := jobRow{Source: "queue", ID: j.ID, Owner: j.Owner, State: string(j.State), Created: &created,
		Started: j.StartedAt, Finished: j.FinishedAt, Instance: j.Instance, ExitCode: j.ExitCode, Reason: j.Reason,
		Script: firstLine(j.Script), WaitingFor: j.WaitingFor, WaitingDetail: j.WaitingDetail}
	if j.StartedAt != nil {
		row.WaitS = ptr(round2(j.StartedAt.Sub(j.CreatedAt).Seconds()))
	}
	return row
}

func startOf(j jobRow) time.Time {
	if j.Created != nil {
		return *j.Created
	}
	if j.Started != nil {
		return *j.Started
	}
	return time.Time{}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = strings.ToValidUTF8(s[:120], "") + "…"
	}
	return s
}

// serveLog hands the request to the API's log endpoint as the signed-in
// principal: ?follow=1 streams the log while the job runs.
func (c *Console) serveLog(w http.ResponseWriter, r *http.Request, _ *session, p api.Principal) {
	c.forward(w, r, p, http.MethodGet, "/api/v1/jobs/"+r.PathValue("id")+"/log")
}

func (c *Console) cancelJob(w http.ResponseWriter, r *http.Request, _ *session, p api.Principal) {
	c.forward(w, r, p, http.MethodPost, "/api/v1/jobs/"+r.PathValue("id")+"/cancel")
}

func (c *Console) forward(w http.ResponseWriter, r *http.Request, p api.Principal, method, path string) {
	r2 := r.Clone(api.WithPrincipal(r.Context(), p))
	r2.Method = method
	r2.URL.Path, r2.URL.RawPath = path, ""
	r2.RequestURI = ""
	r2.Header.Set("Content-Type", "application/json")
	c.opts.JobAPI.ServeHTTP(w, r2)
}

// waitsPage is the body of /ui/api/waits.
type waitsPage struct {
	Waits WaitSeries  `json:"waits"`
	Cost  CostSeries  `json:"cost"`
	Util  FleetSeries `json:"util"`
}

func (c *Console) serveWaits(w http.ResponseWriter, r *http.Request, _ *session, _ api.Principal) {
	from, to := c.timeRange(r, 24*time.Hour)
	fs := c.hist.Fleet(from, to)
	fs.Avg, fs.Max = nil, nil
	writeCached(w, r, waitsPage{Waits: c.hist.Waits(from, to), Cost: c.hist.Cost(from, to), Util: fs})
}

func (c *Console) serveDecisions(w http.ResponseWriter, r *http.Request, _ *session, _ api.Principal) {
	limit := 200
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = min(v, maxDecided)
	}
	c.hist.mu.Lock()
	d := c.hist.decided.newest(limit, nil)
	sizing := c.hist.sizing
	c.hist.mu.Unlock()
	writeCached(w, r, map[string]any{"decisions": d, "sizing": sizing})
}

func (c *Console) serveHealth(w http.ResponseWriter, r *http.Request, _ *session, _ api.Principal) {
	var body any = map[string]string{"status": "unknown"}
	if c.opts.Health != nil {
		body = c.opts.Health()
	}
	writeCached(w, r, body)
}
