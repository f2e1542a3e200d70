variable "name" {
  description = "Name of the managed instance group (provider_config name), also the prefix of everything else."
  type        = string
  default     = "berth-ci"
}

variable "zone" {
  description = "Zone of a zonal group (provider_config zone). Ignored when region is set."
  type        = string
  default     = "europe-west1-b"
}

variable "region" {
  description = "Region of a regional group (provider_config region); empty for a zonal group."
  type        = string
  default     = ""
}

variable "zones" {
  description = "Zones a regional group spreads its instances over."
  type        = list(string)
  default     = []
}

variable "machine_type" {
  description = "Machine type of the CI instances. With suspend, one Compute Engine can suspend (no GPUs, at most 208 GB of memory)."
  type        = string
  default     = "e2-standard-4"
}

variable "image" {
  description = "Boot image: sshd, a POSIX sh, git, and Google's guest agent (all Google-provided images have it)."
  type        = string
  default     = "debian-cloud/debian-12"
}

variable "disk_gb" {
  description = "Boot disk size in GB."
  type        = number
  default     = 50
}

variable "network" {
  description = "VPC network of the instances."
  type        = string
  default     = "default"
}

variable "subnetwork" {
  description = "Subnetwork of the instances; null for the network's default."
  type        = string
  default     = null
}

variable "external_ip" {
  description = "Give instances an external address (berth outside the VPC: use_private_address = false)."
  type        = bool
  default     = false
}

variable "ssh_user" {
  description = "OS user berth logs in as (connector.username)."
  type        = string
  default     = "berth"
}

variable "ssh_public_key" {
  description = "Public half of connector.key_path, authorized_keys format (ssh-ed25519 AAAA... comment)."
  type        = string
}

variable "ssh_port" {
  description = "Port sshd listens on in the image (provider_config ssh_port)."
  type        = number
  default     = 22
}

variable "berth_cidr_blocks" {
  description = "Addresses berth connects from; the firewall rule admits SSH from them only."
  type        = list(string)
}

variable "spot" {
  description = "Make the instances Spot VMs."
  type        = bool
  default     = false
}

variable "suspend" {
  description = "berth's provider_config suspend: adds the read permissions berth needs to check that the machines can suspend."
  type        = bool
  default     = false
}

variable "labels" {
  description = "Labels of the instances."
  type        = map(string)
  default     = {}
}
