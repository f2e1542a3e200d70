# A Compute Engine managed instance group for berth's Google Cloud provider
# (provider = "gcp"): the instance template, the group (zonal, or regional
# when var.region is set), the firewall rule that lets berth reach the
# instances over SSH, and a service account for berth with a least-privilege
# custom role. berth sets the group's target size itself; Terraform only
# creates the group and then leaves that number alone.

terraform {
  required_version = ">= 1.3"
  required_providers {
    google = {
      source  = "hashicorp/google"
      # 6.17 is the first release with target_suspended_size outside
      # google-beta, which the groups' ignore_changes names.
      version = ">= 6.17"
    }
  }
}

locals {
  regional = var.region != ""
  # The permissions berth's calls need (docs/gcp.md lists which call needs
  # which). Reading templates and machine types lets berth refuse
  # suspend = true at start for machines that cannot suspend.
  permissions = concat([
    "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.update",
    "compute.instances.get",
    "compute.instances.getGuestAttributes",
    local.regional ? "compute.regionOperations.get" : "compute.zoneOperations.get",
    ], var.suspend ? [
    "compute.instanceTemplates.get",
    "compute.machineTypes.get",
  ] : [])
}

resource "google_compute_instance_template" "ci" {
  name_prefix  = "${var.name}-"
  machine_type = var.machine_type
  tags         = [var.name]
  labels       = var.labels

  disk {
    source_image = var.image
    disk_size_gb = var.disk_gb
    disk_type    = "pd-balanced"
    boot         = true
    auto_delete  = true
  }

  network_interface {
    subnetwork = var.subnetwork
    # An external address only when berth runs outside the VPC
    # (use_private_address = false).
    dynamic "access_config" {
      for_each = var.external_ip ? [1] : []
      content {}
    }
  }

  metadata = {
    # The group's key: berth logs in as ssh_user with its private half
    # (connector.key_path). No OS Login, so the metadata key applies.
    "ssh-keys"                = "${var.ssh_user}:${var.ssh_public_key}"
    "enable-oslogin"          = "FALSE"
    # The guest agent publishes the SSH host keys here; berth reads them
    # (instances.getGuestAttributes) instead of trusting the first key.
    "enable-guest-attributes" = "TRUE"
    "block-project-ssh-keys"  = "TRUE"
  }

  # Spot VMs cost less; Compute Engine may reclaim them at any time, which
  # ends the job as a system failure (berth sees a deleted instance).
  scheduling {
    provisioning_model          = var.spot ? "SPOT" : "STANDARD"
    preemptible                 = var.spot
    automatic_restart           = !var.spot
    on_host_maintenance         = var.spot ? "TERMINATE" : "MIGRATE"
    instance_termination_action = var.spot ? "STOP" : null
  }

  # The instances need no Google API access of their own; jobs must not
  # borrow an identity they do not need.
  service_account {
    scopes = []
  }

  lifecycle {
    create_before_destroy = true
    precondition {
      condition     = !(var.suspend && can(regex("^(a2|a3|g2|m1|m2|m3)-", var.machine_type)))
      error_message = "suspend = true needs a machine type Compute Engine can suspend: no GPUs, at most 208 GB of memory."
    }
  }
}

resource "google_compute_instance_group_manager" "ci" {
  count              = local.regional ? 0 : 1
  name               = var.name
  zone               = var.zone
  base_instance_name = var.name
  target_size        = 0

  version {
    instance_template = google_compute_instance_template.ci.self_link
  }

  # A new template applies to new instances only: running jobs keep theirs.
  update_policy {
    type                  = "OPPORTUNISTIC"
    minimal_action        = "REPLACE"
    max_unavailable_fixed = 1
  }

  lifecycle {
    # berth owns the group's sizes, the running and the suspended one
    # (suspend = true parks job environments there): a terraform apply
    # must reset neither, or it would create instances or drop parked
    # environments.
    ignore_changes = [target_size, target_suspended_size]
  }
}

resource "google_compute_region_instance_group_manager" "ci" {
  count                     = local.regional ? 1 : 0
  name                      = var.name
  region                    = var.region
  distribution_policy_zones = var.zones
  base_instance_name        = var.name
  target_size               = 0

  version {
    instance_template = google_compute_instance_template.ci.self_link
  }

  update_policy {
    type                         = "OPPORTUNISTIC"
    minimal_action               = "REPLACE"
    max_unavailable_fixed        = length(var.zones)
    instance_redistribution_type = "NONE" # never move (delete) a running job's instance
  }

  lifecycle {
    ignore_changes = [target_size, target_suspended_size]
  }
}

# The instances accept SSH from berth only.
resource "google_compute_firewall" "ssh_from_berth" {
  name          = "${var.name}-ssh-from-berth"
  network       = var.network
  direction     = "INGRESS"
  source_ranges = var.berth_cidr_blocks
  target_tags   = [var.name]

  allow {
    protocol = "tcp"
    ports    = [tostring(var.ssh_port)]
  }
}

# berth's identity: a service account with only what its calls need.
resource "google_service_account" "berth" {
  account_id   = "${var.name}-berth"
  display_name = "berth autoscaler for ${var.name}"
}

resource "google_project_iam_custom_role" "berth" {
  role_id     = replace("${var.name}_berth", "-", "_")
  title       = "berth autoscaler (${var.name})"
  description = "Resize, list, suspend and resume the managed instance group ${var.name}; read its instances' addresses and host keys."
  permissions = local.permissions
}

resource "google_project_iam_member" "berth" {
  project = google_service_account.berth.project
  role    = google_project_iam_custom_role.berth.id
  member  = "serviceAccount:${google_service_account.berth.email}"
}
